package payments_test

import (
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

func eachDriver(t *testing.T, fn func(t *testing.T, drv driver.Driver)) { dbtest.Each(t, fn) }
