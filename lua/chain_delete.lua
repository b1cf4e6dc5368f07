-- Delete one response from its thread hash, idempotently. lua/tokens.lua and
-- lua/chain_lib.lua come in front of this file.
-- KEYS[1] the thread hash   ARGV[1] the id   ARGV[2] operation token (lua/tokens.lua)
-- ARGV[3] the store's TTL in ms: how long the parent of a deleted record, left without
--         children, is kept (it was needed until now)
-- ARGV[4] the caller's owner ('' for none)
-- Returns 1 if the record was there, 0 if not, -1 if its thread is another owner's (to
-- whom it is not there; nothing is written, not even the token).
--
-- The outcome is remembered under the token in the thread's ring ('D' deleted, 'N' not
-- found), so a re-sent copy answers what the first one did and deletes nothing, not even
-- a record saved under the same id in between. Its children stay: a resolve through the
-- gap is session.chain.not_found. A thread left with no record keeps its header and its
-- ring TOKENS_RETAIN_MS, for the re-sends, then goes.
local key, id, token = KEYS[1], ARGV[1], ARGV[2]
local got = redis.call('HMGET', key, 'h', 'ops', 'p:' .. id, 'e:' .. id)
if not got[1] then
  if got[2] or got[3] then return unsupported(key, nil) end
  return 0  -- no thread: nothing to delete, nothing to remember
end
local largest, books, _, _, owner = header(got[1])
if not largest then return unsupported(key, got[1]) end
if not owned(owner, ARGV[4]) then return -1 end
local done = token_find(got[2], token)
if done then return again(done == 'D' and 1 or 0) end
local parent = got[3]
local now = server_ms()
-- writes
redis.call('HSET', key, 'ops', token_push(got[2], token, parent and 'D' or 'N', now))
if not parent then return 0 end
redis.call('HDEL', key, 'd:' .. id, 'p:' .. id, 'e:' .. id, 'k:' .. id, 'l:' .. id)
if books and parent ~= '' then
  local e = tonumber(got[4] or '')
  child_removed(key, parent, (e and e > 0) and e or now + tonumber(ARGV[3]))
end
if redis.call('HLEN', key) <= 2 then  -- only h and ops: no record left to keep the key alive
  local pttl = redis.call('PTTL', key)
  if pttl < 0 or pttl > TOKENS_RETAIN_MS then redis.call('PEXPIRE', key, TOKENS_RETAIN_MS) end
end
return 1
