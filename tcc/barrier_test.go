package tcc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/tcc"
)

// participantDB is a participant's own database: a holds table its phases write, in
// transactions it begins itself, with the barrier inside them.
type participantDB struct {
	t     *testing.T
	drv   driver.Driver
	begin func(ctx context.Context) (tx any, exec func(q string, args ...any) error, commit, rollback func() error)
}

func newParticipantDB(t *testing.T, drv driver.Driver) *participantDB {
	ctx := context.Background()
	p := &participantDB{t: t, drv: drv}
	switch d := drv.(type) {
	case *pgdriver.Driver:
		table := d.Schema() + ".holds"
		_, err := d.Pool().Exec(ctx, "CREATE TABLE "+table+" (branch text NOT NULL, phase text NOT NULL)")
		require.NoError(t, err)
		p.begin = func(ctx context.Context) (any, func(string, ...any) error, func() error, func() error) {
			tx, err := d.Pool().Begin(ctx)
			require.NoError(t, err)
			exec := func(q string, args ...any) error {
				_, err := tx.Exec(ctx, fmt.Sprintf(q, table, "$1", "$2"), args...)
				return err
			}
			return tx, exec, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }
		}
	case *sqlitedriver.Driver:
		_, err := d.DB().ExecContext(ctx, "CREATE TABLE holds (branch TEXT NOT NULL, phase TEXT NOT NULL)")
		require.NoError(t, err)
		p.begin = func(ctx context.Context) (any, func(string, ...any) error, func() error, func() error) {
			tx, err := d.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			exec := func(q string, args ...any) error {
				_, err := tx.ExecContext(ctx, fmt.Sprintf(q, "holds", "?", "?"), args...)
				return err
			}
			return tx, exec, tx.Commit, tx.Rollback
		}
	default:
		t.Fatalf("no participant database for %T", drv)
	}
	return p
}

// deliver runs one delivery of a phase as a participant handler would: its own transaction, the
// barrier, the hold written inside, commit (or rollback on error).
func (p *participantDB) deliver(b *tcc.Barrier, branch tcc.BranchID, phase tcc.Phase) (tcc.BarrierOutcome, error) {
	ctx := context.Background()
	tx, exec, commit, rollback := p.begin(ctx)
	effect := func(ctx context.Context) error {
		return exec("INSERT INTO %s (branch, phase) VALUES (%s, %s)", branch.Participant, string(phase))
	}
	var out tcc.BarrierOutcome
	var err error
	switch phase {
	case tcc.PhaseTry:
		out, err = b.Try(ctx, tx, branch, effect)
	case tcc.PhaseConfirm:
		out, err = b.Confirm(ctx, tx, branch, effect)
	default:
		out, err = b.Cancel(ctx, tx, branch, effect)
	}
	if err != nil {
		require.NoError(p.t, rollback())
		return out, err
	}
	require.NoError(p.t, commit())
	return out, nil
}

func TestBarrier(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		p := newParticipantDB(t, drv)
		b := tcc.NewBarrier(drv)
		type delivery struct {
			phase tcc.Phase
			want  tcc.BarrierOutcome
			err   error
		}
		for _, tc := range []struct {
			name       string
			deliveries []delivery
			effects    map[tcc.Phase]int
		}{
			{"DuplicatedTryAndConfirm", []delivery{
				{tcc.PhaseTry, tcc.BarrierApplied, nil}, {tcc.PhaseTry, tcc.BarrierDuplicate, nil},
				{tcc.PhaseConfirm, tcc.BarrierApplied, nil}, {tcc.PhaseTry, tcc.BarrierDuplicate, nil}, {tcc.PhaseConfirm, tcc.BarrierDuplicate, nil},
			}, map[tcc.Phase]int{tcc.PhaseTry: 1, tcc.PhaseConfirm: 1}},
			{"DuplicatedCancelAfterTry", []delivery{
				{tcc.PhaseTry, tcc.BarrierApplied, nil}, {tcc.PhaseCancel, tcc.BarrierApplied, nil},
				{tcc.PhaseCancel, tcc.BarrierDuplicate, nil}, {tcc.PhaseTry, tcc.BarrierDuplicate, nil},
			}, map[tcc.Phase]int{tcc.PhaseTry: 1, tcc.PhaseCancel: 1}},
			{"EmptyCancelThenHangingTry", []delivery{
				{tcc.PhaseCancel, tcc.BarrierEmptyCancel, nil}, // the try is late (reordered)
				{tcc.PhaseTry, "", tcc.ErrTryAfterCancel},      // it arrives: refused, reserves nothing
				{tcc.PhaseCancel, tcc.BarrierDuplicate, nil},   // the cancel is delivered again
				{tcc.PhaseTry, "", tcc.ErrTryAfterCancel},      // and the try again
			}, map[tcc.Phase]int{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				branch := tcc.BranchID{Transaction: "tx-" + tc.name, Participant: tc.name}
				for i, d := range tc.deliveries {
					out, err := p.deliver(b, branch, d.phase)
					if d.err != nil {
						require.ErrorIs(t, err, d.err, "delivery %d (%s)", i, d.phase)
						class, code := commandbus.Classify(err, commandbus.ClassTransient)
						require.Equal(t, commandbus.ClassPermanent, class, "a refused try is not retried")
						require.Equal(t, tcc.CodeTryAfterCancel, code)
						continue
					}
					require.NoError(t, err, "delivery %d (%s)", i, d.phase)
					require.Equal(t, d.want, out, "delivery %d (%s)", i, d.phase)
				}
				for _, phase := range []tcc.Phase{tcc.PhaseTry, tcc.PhaseConfirm, tcc.PhaseCancel} {
					n := countBranch(t, p, tc.name, phase)
					require.Equal(t, tc.effects[phase], n, "%s effects", phase)
				}
			})
		}

		t.Run("FailedEffectRollsBackTheRecord", func(t *testing.T) {
			ctx := context.Background()
			branch := tcc.BranchID{Transaction: "tx-rollback", Participant: "rollback"}
			tx, _, _, rollback := p.begin(ctx)
			_, err := b.Try(ctx, tx, branch, func(context.Context) error { return fmt.Errorf("no seats") })
			require.ErrorContains(t, err, "no seats")
			require.NoError(t, rollback())
			out, err := p.deliver(b, branch, tcc.PhaseTry)
			require.NoError(t, err)
			require.Equal(t, tcc.BarrierApplied, out, "the redelivered try runs: the failed one left no record")
		})

		t.Run("ConcurrentDuplicateTries", func(t *testing.T) {
			// Two deliveries of one try in two transactions at once: the second waits for the
			// first's record and finds it applied, whichever order they take.
			ctx := context.Background()
			branch := tcc.BranchID{Transaction: "tx-concurrent", Participant: "concurrent"}
			inside, release := make(chan struct{}), make(chan struct{})
			first := make(chan tcc.BarrierOutcome, 1)
			go func() {
				tx, exec, commit, rollback := p.begin(ctx)
				out, err := b.Try(ctx, tx, branch, func(context.Context) error {
					close(inside)
					<-release
					return exec("INSERT INTO %s (branch, phase) VALUES (%s, %s)", branch.Participant, "TRY")
				})
				if err != nil {
					_ = rollback()
					first <- ""
					return
				}
				_ = commit()
				first <- out
			}()
			<-inside
			second := make(chan tcc.BarrierOutcome, 1)
			go func() {
				out, err := p.deliver(b, branch, tcc.PhaseTry)
				if err != nil {
					out = ""
				}
				second <- out
			}()
			close(release)
			outcomes := []tcc.BarrierOutcome{<-first, <-second}
			require.ElementsMatch(t, []tcc.BarrierOutcome{tcc.BarrierApplied, tcc.BarrierDuplicate}, outcomes)
			require.Equal(t, 1, countBranch(t, p, branch.Participant, tcc.PhaseTry), "one reservation")
		})

		t.Run("BadInput", func(t *testing.T) {
			_, err := b.Try(context.Background(), nil, tcc.BranchID{Transaction: "x", Participant: "y"}, nil)
			var verr *commandbus.ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, "tx", verr.Field)
			_, err = b.Cancel(context.Background(), "not a transaction", tcc.BranchID{}, nil)
			require.ErrorAs(t, err, &verr)
			_, err = b.Confirm(context.Background(), "not a transaction", tcc.BranchID{Transaction: "x", Participant: "y"}, nil)
			require.ErrorIs(t, err, driver.ErrWrongTxType)
		})
	})
}

func countBranch(t *testing.T, p *participantDB, branch string, phase tcc.Phase) int {
	t.Helper()
	ctx := context.Background()
	var n int
	switch d := p.drv.(type) {
	case *pgdriver.Driver:
		require.NoError(t, d.Pool().QueryRow(ctx, "SELECT count(*) FROM "+d.Schema()+".holds WHERE branch = $1 AND phase = $2", branch, string(phase)).Scan(&n))
	case *sqlitedriver.Driver:
		require.NoError(t, d.DB().QueryRowContext(ctx, "SELECT count(*) FROM holds WHERE branch = ? AND phase = ?", branch, string(phase)).Scan(&n))
	}
	return n
}
