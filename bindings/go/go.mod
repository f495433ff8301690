module github.com/dds/dds/bindings/go

go 1.19
