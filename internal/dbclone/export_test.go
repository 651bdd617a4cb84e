package dbclone

// NewServerWithTemplate is a Server whose template has the given name, as
// another test binary's would be: For shares one Server per DSN in a
// process.
func NewServerWithTemplate(adminDSN, template string) *Server { return newServer(adminDSN, template) }
