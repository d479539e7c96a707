-- Tenants and capacity-limited admission. A tenant has a tier (whose limit is a row of
-- tenant_tier, FREE 1 / PRO 5 / ENTERPRISE 20 unless configured otherwise), a status and an
-- optional limit of its own. An execution of a capacity-limited type is inserted QUEUED and
-- admitted (PENDING, holds_slot) only while its tenant holds fewer slots than its limit.
--
-- Exactness: every admission runs tenant_admit, which locks the tenant's row (FOR UPDATE) and
-- only then counts the slots held (a new snapshot, after the lock: every admission committed
-- before is seen, and no other admission of the tenant can run until this transaction ends). A
-- slot whose release has not committed yet is still counted, so a race can only admit fewer,
-- never more. A release (the holder's status becoming terminal, by any statement) clears
-- holds_slot and hands the freed slot to the tenant's oldest queued execution in the same
-- transaction; if another transaction holds the tenant's row at that moment, it notifies the
-- admission topic instead, and the admission dispatcher admits after the commit.
CREATE TABLE {schema}.tenant_tier (
    tier       text COLLATE "C" PRIMARY KEY CHECK (tier ~ '^[A-Z][A-Z0-9_]{0,31}$'),
    max_active integer NOT NULL CHECK (max_active >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {schema}.tenant_tier (tier, max_active) VALUES ('FREE', 1), ('PRO', 5), ('ENTERPRISE', 20);

CREATE TABLE {schema}.tenant (
    id                  text COLLATE "C" PRIMARY KEY,
    name                text,
    tier                text COLLATE "C" NOT NULL REFERENCES {schema}.tenant_tier (tier),
    status              text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'deleted')),
    max_active_override integer CHECK (max_active_override >= 0),
    -- Round-robin: the admission dispatcher serves the tenant served longest ago first.
    last_admitted_at    timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE {schema}.execution DROP CONSTRAINT IF EXISTS execution_status_check;
ALTER TABLE {schema}.execution ADD CONSTRAINT execution_status_check CHECK (status IN ('PENDING',
    'EXECUTING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING',
    'COMPENSATED', 'COMPLETED', 'CANCELLED', 'FAILED', 'SUSPENDED', 'QUEUED'));
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS holds_slot boolean NOT NULL DEFAULT false;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS admitted_at timestamptz;
-- A tenant's queue, oldest first.
CREATE INDEX execution_queued_idx ON {schema}.execution (tenant_id, created_at, id) WHERE status = 'QUEUED';
-- A tenant's held slots.
CREATE INDEX execution_slot_idx ON {schema}.execution (tenant_id) WHERE holds_slot;

-- tenant_admit admits up to p_max (NULL: no cap) of the tenant's oldest queued executions into
-- its free slots. p_wait: wait for the tenant's row lock, or give up at once (locked = true) when
-- another transaction holds it. A missing or deleted tenant's queued executions end FAILED
-- (TENANT_NOT_FOUND, TENANT_DELETED); a suspended tenant's stay queued.
CREATE FUNCTION {schema}.tenant_admit(p_tenant text, p_now timestamptz, p_wait boolean, p_max integer)
RETURNS TABLE (admitted integer, failed integer, locked boolean, held integer, max_active integer, tenant_status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_limit  integer;
    v_free   integer;
BEGIN
    admitted := 0; failed := 0; locked := false; held := 0; max_active := 0; tenant_status := NULL;
    IF p_wait THEN
        SELECT t.status, coalesce(t.max_active_override, tt.max_active) INTO v_status, v_limit
        FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
        WHERE t.id = p_tenant FOR UPDATE OF t;
    ELSE
        SELECT t.status, coalesce(t.max_active_override, tt.max_active) INTO v_status, v_limit
        FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
        WHERE t.id = p_tenant FOR UPDATE OF t SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT 1 FROM {schema}.tenant WHERE id = p_tenant) THEN
            locked := true;
            PERFORM pg_notify(left('commandbus_' || '{schema}', 63), 'admission');
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    tenant_status := v_status;
    IF v_status IS NULL OR v_status = 'deleted' THEN
        UPDATE {schema}.execution SET status = 'FAILED', wake_at = NULL, updated_at = p_now, completed_at = p_now,
            error_code = CASE WHEN v_status IS NULL THEN 'TENANT_NOT_FOUND' ELSE 'TENANT_DELETED' END,
            error_message = CASE WHEN v_status IS NULL THEN 'tenant ' || p_tenant || ' does not exist'
                ELSE 'tenant ' || p_tenant || ' is deleted' END
        WHERE tenant_id = p_tenant AND status = 'QUEUED';
        GET DIAGNOSTICS failed = ROW_COUNT;
        RETURN NEXT;
        RETURN;
    END IF;
    max_active := v_limit;
    SELECT count(*) INTO held FROM {schema}.execution WHERE tenant_id = p_tenant AND holds_slot;
    IF v_status <> 'active' THEN
        RETURN NEXT;
        RETURN;
    END IF;
    v_free := v_limit - held;
    IF p_max IS NOT NULL THEN
        v_free := least(v_free, p_max);
    END IF;
    IF v_free > 0 THEN
        UPDATE {schema}.execution e SET status = 'PENDING', holds_slot = true, admitted_at = p_now,
            wake_at = p_now, updated_at = p_now
        FROM (SELECT id FROM {schema}.execution WHERE tenant_id = p_tenant AND status = 'QUEUED'
              ORDER BY created_at, id LIMIT v_free FOR UPDATE SKIP LOCKED) q
        WHERE e.id = q.id;
        GET DIAGNOSTICS admitted = ROW_COUNT;
        IF admitted > 0 THEN
            held := held + admitted;
            UPDATE {schema}.tenant SET last_admitted_at = p_now WHERE id = p_tenant;
            PERFORM pg_notify(left('commandbus_' || '{schema}', 63), 'executions');
        END IF;
    END IF;
    RETURN NEXT;
END $$;

-- The release: a slot holder reaching a terminal status, by whatever statement, gives up its
-- slot (BEFORE) and hands it to the tenant's oldest queued execution (AFTER, which sees the
-- released row), in the same transaction.
CREATE FUNCTION {schema}.execution_slot_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.holds_slot := false;
    RETURN NEW;
END $$;

CREATE FUNCTION {schema}.execution_slot_handoff() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM * FROM {schema}.tenant_admit(NEW.tenant_id, NEW.updated_at, false, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER execution_slot_release BEFORE UPDATE OF status ON {schema}.execution
    FOR EACH ROW WHEN (OLD.holds_slot AND NEW.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED'))
    EXECUTE FUNCTION {schema}.execution_slot_release();
CREATE TRIGGER execution_slot_handoff AFTER UPDATE OF status ON {schema}.execution
    FOR EACH ROW WHEN (OLD.holds_slot AND NEW.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED'))
    EXECUTE FUNCTION {schema}.execution_slot_handoff();

-- Continue-as-new: the successor of an execution that held a slot (admitted_at is set on every
-- admitted execution and kept) starts QUEUED, not PENDING: its predecessor's end handed the slot
-- on, and the successor waits for one like any other execution of its tenant.
CREATE FUNCTION {schema}.execution_successor_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.execution p WHERE p.id = NEW.continued_from AND p.admitted_at IS NOT NULL) THEN
        NEW.status := 'QUEUED';
        NEW.wake_at := NULL;
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION {schema}.execution_successor_admit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM * FROM {schema}.tenant_admit(NEW.tenant_id, NEW.created_at, false, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER execution_successor_queue BEFORE INSERT ON {schema}.execution
    FOR EACH ROW WHEN (NEW.continued_from IS NOT NULL)
    EXECUTE FUNCTION {schema}.execution_successor_queue();
CREATE TRIGGER execution_successor_admit AFTER INSERT ON {schema}.execution
    FOR EACH ROW WHEN (NEW.continued_from IS NOT NULL AND NEW.status = 'QUEUED')
    EXECUTE FUNCTION {schema}.execution_successor_admit();
