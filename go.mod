module github.com/uid-dispenser/uid-dispenser

go 1.26
