-- Save one response into its thread hash, atomically and idempotently.
-- KEYS[1]  the thread hash ({thread} tag: the whole chain lives in this key)
-- ARGV[1]  response id              ARGV[2] parent id ('' for a root)
-- ARGV[3]  expectation: '-' none, '=' the parent must equal ARGV[4] ('' = must be a root)
-- ARGV[4]  expected parent          ARGV[5] overwrite ('1') or not ('0')
-- ARGV[6]  msgspec-encoded record   ARGV[7] TTL in ms ('0' = no expiry)
-- ARGV[8]  how far to walk up when checking an overwrite for a cycle
-- ARGV[9]  operation token (16 hex digits, random per call; absent or '' = none)
-- ARGV[10] unused (the ring's size was sent here before the shared one, lua/tokens.lua)
-- ARGV[11] '1': keep the books of per-response expiry (lua/chain_lib.lua)
-- ARGV[12] the parent's id packed (16 bytes, redis_sessions/responses/names.py), when it
--          and this id were minted for the thread; '' = this record keeps no names list
-- ARGV[13] the parent's ancestors packed, parent first, as the worker last read them
--          ('' = none: a list goes on only from the parent's own, lua/chain_lib.lua)
-- Returns 'ok', {reason, detail}, or, saved, {'cover', ...}: the locators of ancestors
-- minted elsewhere to renew (lua/chain_lib.lua's cover_reply). Checks first, writes last: a refusal
-- writes nothing, and nothing after the first write can fail.
--
-- Idempotent: redis-py re-sends a script whose reply was lost, so this may run
-- twice. A token found in the ring is this very call, already done: answer 'ok'
-- and write nothing, even if the record was deleted or overwritten since. The
-- same record (bytes and parent) already stored is 'ok' too, with no write: that
-- covers a caller's own retry under a new token, and a ring that has moved on.
-- A key of another type fails the first read with WRONGTYPE, before any write
-- (one command fewer than asking TYPE on every save).
-- The checks and the writes are lua/chain_lib.lua's (shared with chain_save_turn.lua).
local reply, st = save_check(KEYS[1], ARGV)
if reply then return reply end
return save_write(KEYS[1], ARGV, st)
