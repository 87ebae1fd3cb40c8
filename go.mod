module github.com/fzsidecar/fzsidecar

go 1.26
