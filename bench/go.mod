module github.com/uid-dispenser/uid-dispenser/bench

go 1.26.0

replace github.com/uid-dispenser/uid-dispenser => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/sony/sonyflake/v2 v2.2.0
	github.com/uid-dispenser/uid-dispenser v0.0.0
)
