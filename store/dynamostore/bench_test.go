package dynamostore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"stead/approvals"
	"stead/runtime/engine"
	"stead/runtime/jsvm"
	"stead/store"
	"stead/store/dynamostore"
	"stead/store/fsblob"
)

// benchHandlers return about 1 KB each. "json" outputs are a realistic
// order (repeated keys: deflate shrinks them about 3x); "random" outputs
// carry a kilobyte of random base-36 text that hardly compresses.
const benchHandlers = `
function filler(kind) {
  if (kind !== "random") return "";
  let s = "";
  while (s.length < 700) s += Math.random().toString(36).slice(2);
  return s.slice(0, 700);
}
function order(id, kind) {
  const items = [];
  const n = kind === "random" ? 2 : 8;
  for (let i = 0; i < n; i++) {
    items.push({ sku: "SKU-" + (1000 + i * 37), name: "Item number " + i + " of the order", qty: 1 + (i % 3), unitPrice: 9.99 + i, currency: "EUR" });
  }
  return { id, status: "delivered", customer: { id: "c-42", name: "Ada Lovelace", email: "ada@example.com", tier: "standard" },
    items, shipping: { carrier: "DHL", tracking: "JD0146000012345678", address: "1 Analytical Engine Way, London" }, note: filler(kind) };
}
export async function lookup(input) { return order(input.id, input.kind); }
export async function enrich(input) { return { ...input.order, tier: "gold", score: 0.93 }; }
export async function apply(input) {
  const o = input.order;
  return { applied: true, order: o.id, refund: { amount: 42.5, currency: "EUR", lines: o.items.map((it) => ({ sku: it.sku, qty: it.qty })) },
    receipt: "RF-" + o.id + "-0001", note: o.note };
}
`

const benchConfig = `{
  "agents": {
    "gated3": {
      "tools": { "lookup": { "effect": "read" }, "enrich": { "effect": "read" }, "apply": { "effect": "write", "requiresApproval": true } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id", "kind": "$input.kind" } },
        { "id": "enrich", "tool": "enrich", "input": { "order": "$steps.lookup.output" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.enrich.output" } }
      ]
    },
    "ungated3": {
      "tools": { "lookup": { "effect": "read" }, "enrich": { "effect": "read" }, "apply": { "effect": "write" } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id", "kind": "$input.kind" } },
        { "id": "enrich", "tool": "enrich", "input": { "order": "$steps.lookup.output" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.enrich.output" } }
      ]
    },
    "quorum3": {
      "tools": { "lookup": { "effect": "read" }, "enrich": { "effect": "read" },
        "apply": { "effect": "write", "requiresApproval": true, "approvals": { "approvers": { "group": "finance", "min": 2 } } } },
      "steps": [
        { "id": "lookup", "tool": "lookup", "input": { "id": "$input.id", "kind": "$input.kind" } },
        { "id": "enrich", "tool": "enrich", "input": { "order": "$steps.lookup.output" } },
        { "id": "apply", "tool": "apply", "input": { "order": "$steps.enrich.output" } }
      ]
    }
  }
}`

type nopDispatch struct{}

func (nopDispatch) Dispatch(context.Context, string) error { return nil }

// Prices (us-east-1, on-demand, Nov 2024 onwards).
const (
	usdPerMWU         = 0.625
	usdPerMRU         = 0.125
	usdPerMLambdaReq  = 0.20
	usdPerLambdaGBs   = 0.0000166667
	lambdaGB          = 0.25
	usdPerSFNTransit  = 0.025 / 1000
	lambdaInvocations = 4 // API start, runner, API approve, runner
)

// sfnTransitions is what AWS Step Functions Standard bills for the same run.
// The workflow: Lookup (Task) → Enrich (Task) → RequestApproval (Task,
// lambda:invoke.waitForTaskToken, TimeoutSeconds = the approval timeout; the
// approve API calls SendTaskSuccess, deny SendTaskFailure, caught into a
// Fail state) → Apply (Task) → Done (Succeed). Every state entered is one
// transition: 5. This is the least a faithful workflow needs — a Choice
// state for edited inputs or policy outcomes adds one each — and it leaves
// out the Lambda invocations Step Functions would still make for the three
// tools and the approval request, so the comparison favours Step Functions.
const sfnTransitions = 5

// BenchmarkGatedRunCost runs 3-step gated runs (two read steps, one gated
// write step, ~1 KB outputs; create → execute → pause → approve → execute
// → succeeded) through the real engine on dynamostore against moto_server,
// and reports what a run costs on DynamoDB as counted by a meter on the
// store's client (see meter): requests, write units and read units per run,
// and dollars per million runs for DynamoDB on-demand, Lambda (4 invocations
// at 256 MB, billed for the in-process time measured here against moto —
// AWS's own latency would add a few ms per request) and Step Functions
// Standard for the same workflow.
//
// quorum=2of3 is the same run with its approval needing two of a group of
// three: what a 2-of-N vote adds (the group and members read when it asks,
// a read and a write per vote).
//
// notify=3 is output=json with its approval.requested, approval.approved
// and run.succeeded events notifying (store.Event.Notify, as the engine
// sets it for a project with webhook endpoints), and the outbox drained
// after each of the three writes as a notifier kicked by them would: what
// the outbox adds to a run — the marks in the run's own writes, each
// entry's index write in and out, and the acks (ListOutbox and AckOutbox;
// the fan-out's reads of the run and its events, and the deliveries
// themselves, are the notifier's and per endpoint, not counted here).
// outbox-WU/run and outbox-RU/run are the drains' share.
func BenchmarkGatedRunCost(b *testing.B) {
	for _, kind := range []string{"json", "random"} {
		b.Run("output="+kind, func(b *testing.B) { benchGatedRun(b, "gated3", kind, false) })
	}
	b.Run("quorum=2of3", func(b *testing.B) { benchGatedRun(b, "quorum3", "json", false) })
	b.Run("output=json/notify=3", func(b *testing.B) { benchGatedRun(b, "gated3", "json", true) })
}

// notifyingStore flags the events of the types in notify as notifying, on
// every write that appends events, as the engine does for a project with
// webhook endpoints.
type notifyingStore struct {
	store.Store
	notify map[string]bool
}

func (s notifyingStore) flag(events []store.Event) {
	for i := range events {
		events[i].Notify = s.notify[events[i].Type]
	}
}

func (s notifyingStore) CreateRun(ctx context.Context, r store.Run, events []store.Event) (store.Run, error) {
	s.flag(events)
	return s.Store.CreateRun(ctx, r, events)
}

func (s notifyingStore) CommitRun(ctx context.Context, c store.RunCommit) (store.Run, error) {
	s.flag(c.Events)
	return s.Store.CommitRun(ctx, c)
}

func (s notifyingStore) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	s.flag(p.Events)
	return s.Store.DecideApproval(ctx, p)
}

// gatedBench is the engine on a metered dynamostore (against moto_server),
// with benchConfig deployed; plain reads the same table unmetered.
type gatedBench struct {
	eng   *engine.Engine
	plain *dynamostore.Store
	// metered is the engine's store, on the meter.
	metered *dynamostore.Store
	m       *meter
	actor   approvals.Actor
	// voters are two members of the group "finance" (of three).
	voters []approvals.Actor
}

// wrap, if given, wraps the store the engine writes through.
func newGatedBench(tb testing.TB, wrap ...func(store.Store) store.Store) gatedBench {
	srv := aws.Get(tb)
	ctx := context.Background()
	raw := srv.DynamoDB()
	plain := fresh(tb, dynamostore.Options{})
	m := newMeter(raw, plain.Table())
	metered, err := dynamostore.New(srv.DynamoDB(m.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	blobs, err := fsblob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	rt := jsvm.New(jsvm.Options{})
	tb.Cleanup(rt.Close)
	var st store.Store = metered
	for _, w := range wrap {
		st = w(st)
	}
	eng, err := engine.New(engine.Config{
		Store: st, Blobs: blobs, Invoker: rt, Dispatch: nopDispatch{},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := plain.CreateProject(ctx, store.Project{ID: "prj_bench", SigningKey: []byte("bench-signing-key-of-32-bytes!!!"), CreatedAt: time.Now()}); err != nil {
		tb.Fatal(err)
	}
	actor := approvals.Actor{ProjectID: "prj_bench", Role: approvals.RoleDeveloper, ID: "key_bench"}
	var voters []approvals.Actor
	var finance []string
	for _, name := range []string{"ana", "bo", "cy"} {
		m := store.Member{ID: "mem_" + name, ProjectID: "prj_bench", Name: name, Role: approvals.RoleApprover, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if err := plain.CreateMember(ctx, m); err != nil {
			tb.Fatal(err)
		}
		finance = append(finance, m.ID)
		voters = append(voters, approvals.Actor{ProjectID: "prj_bench", Role: m.Role, ID: "key_" + name, Name: name, MemberID: m.ID})
	}
	if err := plain.CreateGroup(ctx, store.Group{ProjectID: "prj_bench", Name: "finance", Members: finance, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		tb.Fatal(err)
	}
	if _, err := eng.Deploy(ctx, actor, engine.DeployParams{Bundle: []byte(benchHandlers), Config: []byte(benchConfig)}); err != nil {
		tb.Fatal(err)
	}
	return gatedBench{eng: eng, plain: plain, metered: metered, m: m, actor: actor, voters: voters[:2]}
}

func benchGatedRun(b *testing.B, agent, kind string, notify bool) {
	var wrap []func(store.Store) store.Store
	if notify {
		wrap = append(wrap, func(s store.Store) store.Store {
			return notifyingStore{Store: s, notify: map[string]bool{"approval.requested": true, "approval.approved": true, "run.succeeded": true}}
		})
	}
	g := newGatedBench(b, wrap...)
	ctx := context.Background()
	plain, m := g.plain, g.m
	input := json.RawMessage(`{"id":"o-1","kind":"` + kind + `"}`)
	// drain takes the run out of the outbox, as a notifier kicked by a
	// notifying write would; drainWU and drainRU are what that cost.
	var drainWU, drainRU float64
	drain := func() {
		if !notify {
			return
		}
		_, wu0, ru0 := m.Totals()
		entries, err := g.metered.ListOutbox(ctx, 100)
		if err != nil {
			b.Fatal(err)
		}
		if len(entries) != 1 {
			b.Fatalf("outbox %v after a notifying write, want one run", entries)
		}
		for _, e := range entries {
			r, err := plain.GetRun(ctx, e.RunID) // the fan-out's read, not the outbox's
			if err != nil {
				b.Fatal(err)
			}
			if err := g.metered.AckOutbox(ctx, e.RunID, r.LastSeq); err != nil {
				b.Fatal(err)
			}
		}
		_, wu1, ru1 := m.Totals()
		drainWU, drainRU = drainWU+wu1-wu0, drainRU+ru1-ru0
	}
	run := func() time.Duration { return g.run(b, agent, input, drain) }
	run() // warm the engine's caches (deployment, compiled bundle, signing key)
	m.Reset()
	drainWU, drainRU = 0, 0
	var busy time.Duration
	n := 0
	for b.Loop() {
		busy += run()
		n++
	}
	requests, wu, ru := m.Totals()
	perRun := func(x float64) float64 { return x / float64(n) }
	lambdaSec := busy.Seconds() / float64(n)
	dynamo := perRun(wu)*usdPerMWU + perRun(ru)*usdPerMRU
	lambda := lambdaInvocations*usdPerMLambdaReq + lambdaSec*lambdaGB*usdPerLambdaGBs*1e6
	sfn := sfnTransitions * usdPerSFNTransit * 1e6
	b.ReportMetric(perRun(float64(requests)), "req/run")
	b.ReportMetric(perRun(wu), "WU/run")
	b.ReportMetric(perRun(ru), "RU/run")
	b.ReportMetric(lambdaSec*1000, "lambda-ms/run")
	b.ReportMetric(dynamo, "$dynamodb/Mruns")
	b.ReportMetric(lambda, "$lambda/Mruns")
	b.ReportMetric(dynamo+lambda, "$total/Mruns")
	b.ReportMetric(sfn, "$stepfunctions/Mruns")
	b.ReportMetric(sfn/(dynamo+lambda), "x-cheaper")
	if notify {
		b.ReportMetric(perRun(drainWU), "outbox-WU/run")
		b.ReportMetric(perRun(drainRU), "outbox-RU/run")
	}
	b.Logf("%d runs: %s", n, m.Breakdown(n))
}

// run is one gated run of agent, from its start to its end: the engine's
// work in it, with the approval decided by the bench's actor (by two of the
// group's voters for quorum3) and drain called after each of the run's
// three writes that notify. It returns the time the engine was busy, less
// the meter's own.
func (g gatedBench) run(tb testing.TB, agent string, input json.RawMessage, drain func()) time.Duration {
	ctx := context.Background()
	eng, plain, m, actor := g.eng, g.plain, g.m, g.actor
	var busy time.Duration
	phase := func(fn func() error) {
		o, t := m.Overhead(), time.Now()
		if err := fn(); err != nil {
			tb.Fatal(err)
		}
		busy += time.Since(t) - (m.Overhead() - o)
	}
	var r store.Run
	phase(func() (err error) {
		r, _, err = eng.StartRun(ctx, actor, engine.StartParams{Agent: agent, Input: input, EndUserID: "u1"})
		return err
	})
	phase(func() error { return eng.Execute(ctx, r.ID) })
	drain() // approval.requested

	paused, err := plain.GetRun(ctx, r.ID) // the person's view: not part of the run's cost
	if err != nil || paused.Status != store.RunAwaitingApproval {
		tb.Fatalf("run %s is %s, want awaiting-approval (%v)", r.ID, paused.Status, err)
	}
	deciders := []approvals.Actor{actor}
	if agent == "quorum3" {
		deciders = g.voters
	}
	for _, who := range deciders {
		phase(func() error {
			_, err := eng.Decide(ctx, who, engine.DecideParams{ApprovalID: paused.ApprovalID, Approve: true})
			return err
		})
	}
	drain() // approval.approved
	phase(func() error { return eng.Execute(ctx, r.ID) })
	drain() // run.succeeded
	done, err := plain.GetRun(ctx, r.ID)
	if err != nil || done.Status != store.RunSucceeded {
		tb.Fatalf("run %s is %s, want succeeded (%v, %v)", r.ID, done.Status, done.Error, err)
	}
	return busy
}
