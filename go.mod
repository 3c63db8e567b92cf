module github.com/bitnet-go/bitnet_go

go 1.26

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	gonum.org/v1/gonum v0.17.0
)

require golang.org/x/sys v0.41.0 // indirect
