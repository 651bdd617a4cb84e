package opsmcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsdesk/opsdesk/internal/dbtest"
	"github.com/opsdesk/opsdesk/ops"
	"github.com/opsdesk/opsdesk/ops/opsmcp"
)

// PageInput is what the model proposes: whom to page, and why.
type PageInput struct {
	Team    string `json:"team" jsonschema:"the team to page"`
	Summary string `json:"summary"`
}

// Page is the pager's answer.
type Page struct {
	ID string `json:"id"`
}

// The README's example: an MCP server whose page-oncall tool runs once per
// key, called by an agent that retries after a lost answer, then reuses the
// key for another intent, then forgets the key.
func Example() {
	dsn := exampleServiceDSN() // a role granted opsdesk_service
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := ops.New(pool, ops.Config{
		// The pager deduplicates by key: an unknown outcome is retried.
		Tools: map[string]ops.Policy{"page-oncall": {Effect: ops.EffectIdempotentProvider}},
	})
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "oncall", Version: "1"}, nil)
	var pages atomic.Int64
	err = opsmcp.AddExternalTool(server, store, &mcp.Tool{Name: "page-oncall", Description: "Pages a team's on-call."},
		opsmcp.Config{
			// The tenant comes from the session's authentication, never
			// from the arguments.
			Tenant: func(ctx context.Context, req *mcp.CallToolRequest) (string, error) { return "acme", nil },
		},
		func(ctx context.Context, req *mcp.CallToolRequest, a ops.Attempt, in PageInput) (Page, error) {
			// Send a.ProviderKey() to the pager as its idempotency key.
			return Page{ID: fmt.Sprintf("page-%d", pages.Add(1))}, nil
		})
	if err != nil {
		log.Fatal(err)
	}

	serverSide, clientSide := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, serverSide, nil); err != nil {
		log.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "orchestrator", Version: "1"}, nil)
	session, err := client.Connect(ctx, clientSide, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	// The orchestrator names the key from its durable run and step state.
	call := func(key string, in PageInput) {
		params := &mcp.CallToolParams{Name: "page-oncall", Arguments: in}
		if key != "" {
			params.Meta = mcp.Meta{opsmcp.KeyMeta: key}
		}
		res, err := session.CallTool(ctx, params)
		if err != nil {
			log.Fatal(err) // a protocol error: none of the library's answers is one
		}
		out, _ := json.Marshal(res.StructuredContent)
		if res.IsError {
			var te opsmcp.ToolError
			if err := json.Unmarshal(out, &te); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("tool error %s (retry with the same key: %t)\n", te.Class, te.RetryWithSameKey)
			return
		}
		fmt.Printf("%s replayed=%v\n", out, res.Meta[opsmcp.ReplayedMeta])
	}
	in := PageInput{Team: "storage", Summary: "disk full on db-3"}
	call("run-42/step-3", in)
	call("run-42/step-3", in) // the answer was lost: the same step, retried
	call("run-42/step-3", PageInput{Team: "network", Summary: "disk full on db-3"})
	call("", in)
	fmt.Println(pages.Load(), "page")

	// Output:
	// {"id":"page-1"} replayed=false
	// {"id":"page-1"} replayed=true
	// tool error conflict (retry with the same key: false)
	// tool error key_missing (retry with the same key: false)
	// 1 page
}

// exampleServiceDSN prepares a fresh migrated database and returns the
// service role's DSN. It is dropped when the test binary exits.
func exampleServiceDSN() string {
	d, _, err := dbtest.Create(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return d.ServiceDSN
}
