-- Expired idempotency records are deleted by creation time, oldest first
-- (yaps.Store.DeleteIdempotencyBefore).
CREATE INDEX idempotency_created ON idempotency (created_at);
