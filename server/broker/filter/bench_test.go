package filter

import "testing"

// BenchmarkMatch is the cost of one evaluation against a message's
// property map (no allocation: TestMatchAllocatesNothing).
func BenchmarkMatch(b *testing.B) {
	props := map[string]string{"region": "eu", "amount": "1250", "TAGS": "paid", "source": "web", "score": "0.75"}
	for _, bc := range []struct{ name, expr string }{
		{"string-eq", `region = 'eu'`},
		{"int-compare", `amount > 1000`},
		{"and-of-three", `region = 'eu' AND amount BETWEEN 1000 AND 2000 AND TAGS IN ('paid', 'created')`},
		{"decimal-or-null", `score >= 0.5 OR missing IS NULL`},
	} {
		e, err := Compile(bc.expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !e.Match(props) {
					b.Fatal("no match")
				}
			}
		})
	}
}
