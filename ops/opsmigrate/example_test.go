package opsmigrate_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops/opsmigrate"
)

// The README's "Installing the schema from Go": migrate at start-up with an
// administrator's pool, then check the schema the service will run on.
func Example() {
	ctx := context.Background()
	adminDSN := exampleAdminDSN() // a superuser, or the database's owner with CREATEROLE

	pool, err := pgxpool.New(ctx, adminDSN)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	res, err := opsmigrate.Migrate(ctx, pool, nil)
	if errors.Is(err, opsmigrate.ErrSchemaAhead) {
		log.Fatal("a newer opsdesk migrated this database: upgrade the library")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("from", res.From, "to the latest:", res.To == opsmigrate.LatestVersion())

	res, err = opsmigrate.Migrate(ctx, pool, nil) // idempotent: another instance's run finds nothing to do
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("applied again:", len(res.Applied))

	v, err := opsmigrate.Check(ctx, pool) // ErrSchemaBehind or ErrSchemaAhead on a mismatch
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("database matches the library:", v.Database == v.Library)

	// Output:
	// from 0 to the latest: true
	// applied again: 0
	// database matches the library: true
}

// exampleAdminDSN creates an empty database on the tests' server and
// returns a superuser DSN for it; it is dropped when the test binary exits.
func exampleAdminDSN() string {
	dsn, _, err := dbtest.CreateEmpty(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return dsn
}
