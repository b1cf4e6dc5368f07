-- Save one response into its thread hash, atomically and idempotently.
-- lua/tokens.lua and lua/chain_lib.lua come in front of this file.
-- KEYS[1]  the thread hash ({thread} tag: the whole chain lives in this key)
-- ARGV[1]  response id              ARGV[2] parent id ('' for a root)
-- ARGV[3]  expectation: '-' none, '=' the parent must equal ARGV[4] ('' = must be a root)
-- ARGV[4]  expected parent          ARGV[5] overwrite ('1') or not ('0')
-- ARGV[6]  the record (redis_sessions/codec.py)   ARGV[7] TTL in ms ('0' = no expiry)
-- ARGV[8]  how far to walk up when checking an overwrite for a cycle
-- ARGV[9]  operation token (lua/tokens.lua)
-- ARGV[10] '1': a new thread keeps the books of per-response expiry (lua/chain_lib.lua)
-- ARGV[11] '1': the parent's id was minted elsewhere (it has a locator)
-- ARGV[12] the caller's owner ('' for none): a new thread is theirs (data format 2); to
--          another owner, a thread is not there (its parent RSPARENT, its root RSTAKEN)
-- Returns 'ok', or, saved, {'cover', ...}: ancestors' locators to renew (chain_lib.lua);
-- refuses with RSEXISTS, RSEXPECTED, RSPARENT, RSTAKEN, RSCYCLE, RSDEEP, RSVERSION, RSREUSED.
--
-- Idempotent: redis-py re-sends a script whose reply was lost, so this may run twice.
-- A token found in the ring is this very call, already done: 'ok', nothing written,
-- even if the record was deleted or overwritten since. The same record (bytes and
-- parent) already stored is 'ok' too. Checks first, writes last: a refusal writes
-- nothing, and nothing after the first write can fail. A key of another type fails the
-- first read with WRONGTYPE, before any write.
local reply, got, leaf = save_check(KEYS[1], ARGV)
if reply then return reply end
return save_write(KEYS[1], ARGV, got, leaf)
