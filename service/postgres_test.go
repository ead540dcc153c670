package service_test

import (
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// pg is the PostgreSQL server of the tests that run on PostgreSQL, started by the first.
var pg = new(pgtest.Server)

func TestMain(m *testing.M) { pgtest.Main(m, pg) }
