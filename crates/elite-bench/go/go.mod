module elite-bench-go

go 1.21
