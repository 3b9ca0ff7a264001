package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFaultFSAtomicReplace: the images of a power loss around an atomic
// replace hold the old content or the new one, and before the directory
// fsync a lost rename (old content) or a leftover .tmp.
func TestFaultFSAtomicReplace(t *testing.T) {
	root := t.TempDir()
	c, err := NewFaultFS(OS(), root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "meta")
	if err := WriteFileAtomic(c, path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.SetCapture(func(e Event) bool { return true })
	if err := WriteFileAtomic(c, path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	n := 0
	for _, p := range c.Points() {
		for _, im := range p.Images(0, 1) {
			dir := t.TempDir()
			if err := p.Materialize(im, dir); err != nil {
				t.Fatal(err)
			}
			n++
			b, err := os.ReadFile(filepath.Join(dir, "meta"))
			if err != nil {
				t.Fatalf("point %d image %s: meta lost: %v", p.N, im.Name, err)
			}
			if s := string(b); s != "old" && s != "new" {
				t.Fatalf("point %d image %s: meta holds %q", p.N, im.Name, s)
			}
			seen[string(b)] = true
		}
	}
	if !seen["old"] || !seen["new"] {
		t.Fatalf("images hold %v, want both old and new", seen)
	}
	t.Logf("%d images", n)
}

// TestFaultFSMappingPending: stores through a mapping are pending until
// msync covers them; a torn image cuts them at a sector.
func TestFaultFSMappingPending(t *testing.T) {
	root := t.TempDir()
	c, err := NewFaultFS(OS(), root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Create(filepath.Join(root, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir(root); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	b := m.Bytes()
	for i := 0; i < 1024; i++ {
		b[i] = 'a'
	}
	if err := m.Sync(0, 1024); err != nil {
		t.Fatal(err)
	}
	for i := 1024; i < 2048; i++ {
		b[i] = 'b'
	}
	p := c.Snapshot()
	if d, r := p.Pending(); d != 0 || r != 1 {
		t.Fatalf("pending dirOps %d runs %d, want 0 and 1", d, r)
	}
	ims := p.Images(0, 1)
	var torn bool
	for _, im := range ims {
		dir := t.TempDir()
		if err := p.Materialize(im, dir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "seg"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4096 {
			t.Fatalf("%s: size %d", im.Name, len(got))
		}
		for i := 0; i < 1024; i++ {
			if got[i] != 'a' {
				t.Fatalf("%s: durable byte %d lost", im.Name, i)
			}
		}
		nb := 0
		for i := 1024; i < 2048; i++ {
			if got[i] == 'b' {
				nb++
			}
		}
		if nb != 0 && nb != 1024 {
			torn = true
		}
	}
	if !torn {
		t.Fatal("no torn image")
	}
	_ = f.Close()
}
