package payments

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
)

// handleCheckDailyLimit records the payment against the debit account's limit for the day.
func (p *Platform) handleCheckDailyLimit(ctx context.Context, cmd *commandbus.Command[CheckDailyLimit]) (any, error) {
	key := stepKey(cmd)
	if p.mayFail(StepCheckDailyLimit, cmd.Args.Simulation) {
		if res, err := p.reservationByKey(ctx, p.store.db, key); err == nil {
			return res, nil
		} else if !notFound(err) {
			return nil, err
		}
		if _, err := p.simulate(ctx, StepCheckDailyLimit, cmd.Args.Simulation, rollKey(cmd)); err != nil {
			return nil, err
		}
	}
	args := cmd.Args
	var result *CheckDailyLimitResult
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		// The day's usage row carries the account's limit, so one locked read has both.
		if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}limit_usage (account_id, day, used, day_limit)
			SELECT id, $2, '0', daily_limit FROM {t}account WHERE id = $1 ON CONFLICT (account_id, day) DO NOTHING`), args.Account, args.Day); err != nil {
			return err
		}
		var usedText, limitText string
		err := tx.QueryRowContext(ctx, p.store.q(`SELECT used, day_limit FROM {t}limit_usage WHERE account_id = $1 AND day = $2`+p.store.forUpdate),
			args.Account, args.Day).Scan(&usedText, &limitText)
		if notFound(err) {
			return commandbus.Permanent("ACCOUNT_NOT_FOUND", fmt.Errorf("account %s does not exist", args.Account))
		}
		if err != nil {
			return err
		}
		used, err := decimal.NewFromString(usedText)
		if err != nil {
			return err
		}
		limit, err := decimal.NewFromString(limitText)
		if err != nil {
			return err
		}
		id := "LIM-" + uuid.NewString()
		now := micros(p.now())
		res, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}limit_reservation
			(id, idempotency_key, payment_id, account_id, day, amount, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'ACTIVE', $7, $7) ON CONFLICT (idempotency_key) DO NOTHING`),
			id, key, args.PaymentID.String(), args.Account, args.Day, args.Amount.String(), now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			result, err = p.reservationByKey(ctx, tx, key) // a redelivery: recorded already
			return err
		}
		if used.Add(args.Amount).GreaterThan(limit) {
			return &commandbus.BusinessRuleError{Code: "DAILY_LIMIT_EXCEEDED",
				Message: fmt.Sprintf("account %s has used %s of its %s limit on %s; %s more is too much", args.Account, used, limit, args.Day, args.Amount)}
		}
		used = used.Add(args.Amount)
		if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}limit_usage SET used = $3 WHERE account_id = $1 AND day = $2`),
			args.Account, args.Day, used.String()); err != nil {
			return err
		}
		result = &CheckDailyLimitResult{ReservationID: id, Used: used, Limit: limit}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := p.afterEffect(StepCheckDailyLimit); err != nil {
		return nil, err
	}
	return result, nil
}

func (p *Platform) reservationByKey(ctx context.Context, q queryer, key string) (*CheckDailyLimitResult, error) {
	var id string
	if err := q.QueryRowContext(ctx, p.store.q(`SELECT id FROM {t}limit_reservation WHERE idempotency_key = $1`), key).Scan(&id); err != nil {
		return nil, err
	}
	return &CheckDailyLimitResult{ReservationID: id}, nil
}

// handleReleaseDailyLimit gives the payment's active reservations back (idempotent).
func (p *Platform) handleReleaseDailyLimit(ctx context.Context, cmd *commandbus.Command[ReleaseDailyLimit]) (any, error) {
	released := 0
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, p.store.q(`SELECT id, account_id, day, amount FROM {t}limit_reservation
			WHERE payment_id = $1 AND status = 'ACTIVE' ORDER BY id`), cmd.Args.PaymentID.String())
		if err != nil {
			return err
		}
		type reservation struct{ id, account, day, amount string }
		var list []reservation
		for rows.Next() {
			var r reservation
			if err := rows.Scan(&r.id, &r.account, &r.day, &r.amount); err != nil {
				rows.Close()
				return err
			}
			list = append(list, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range list {
			if cmd.Args.ReservationID != "" && r.id != cmd.Args.ReservationID {
				continue
			}
			var usedText string
			if err := tx.QueryRowContext(ctx, p.store.q(`SELECT used FROM {t}limit_usage WHERE account_id = $1 AND day = $2`+p.store.forUpdate),
				r.account, r.day).Scan(&usedText); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}limit_reservation SET status = 'RELEASED', updated_at = $2 WHERE id = $1 AND status = 'ACTIVE'`),
				r.id, micros(p.now()))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			used, err := decimal.NewFromString(usedText)
			if err != nil {
				return err
			}
			amount, err := decimal.NewFromString(r.amount)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}limit_usage SET used = $3 WHERE account_id = $1 AND day = $2`),
				r.account, r.day, used.Sub(amount).String()); err != nil {
				return err
			}
			released++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]int{"released": released}, nil
}
