-- Erasing an owner (right to erasure): every memory, revision, event,
-- slot, workspace, state, grant (given or received), group membership,
-- token, access count, miss and audit row of the owner, in one transaction.
-- One audit row records the erasure itself. Run as a superuser.

-- What will go (check the name first).
SELECT jsonb_pretty(engram.stats(owner => 'alice'));

-- Erase; the result counts what went.
SELECT jsonb_pretty(engram.erase_owner(owner => 'alice'));

-- Nothing of alice is left but the record of the erasure.
SELECT at, actor, action, details FROM engram.audit_log WHERE owner = 'alice';

-- Erasing one memory instead (its revisions and access counts go with it):
-- SELECT engram.forget(owner => 'alice', id => '...', hard => true);
