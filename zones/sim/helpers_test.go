package sim

import "github.com/ghostwire/ghostwire/zones/interest"

func interestBad() interest.Config { return interest.Config{EnterRadius: 100, LeaveRadius: 10} }
