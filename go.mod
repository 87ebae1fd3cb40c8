module github.com/fzsidecar/fzsidecar

go 1.26.0

require (
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/term v0.47.0 // indirect
)
