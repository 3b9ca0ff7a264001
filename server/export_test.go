package server

// What the external tests (package server_test, which use servertest)
// may see of the server's internals.

// HasMirror reports whether s runs the PostgreSQL mirror.
func HasMirror(s *Server) bool { return s.mirror != nil }
