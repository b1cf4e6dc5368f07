-- Delete one response from its thread hash, idempotently.
-- lua/chain_jumps.lua and lua/chain_lib.lua come in front of this file.
-- KEYS[1] the thread hash   ARGV[1] the id
-- ARGV[2] operation token (16 hex digits, random per call; '' = none)
-- ARGV[3], ARGV[4] unused (the ring's bounds were sent here before the shared one,
--         lua/tokens.lua, which keeps a thread left with only its ring TOKENS_RETAIN_MS)
-- ARGV[5] the store's TTL in ms: how long the parent of a deleted record, left
--         without children, is kept (it was needed until now)
-- ARGV[6] '1': keep the books of per-response expiry (chain_lib.lua)
-- Returns 1 if the record was there, 0 if not, or {'wrongtype', kind}.
--
-- The outcome is remembered under the token in the thread's ring ('D' deleted,
-- 'N' not found), so a re-sent copy answers what the first one did and deletes
-- nothing, not even a record saved under the same id in between. A later save of
-- that id works as usual: the ring remembers calls, not ids.
local key, id, token = KEYS[1], ARGV[1], ARGV[2]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return 0 end
if kind ~= 'hash' then return {'wrongtype', kind} end

local ring = redis.call('HGET', key, 'ops') or ''
local done = token_find(ring, token)
if done then return done == 'D' and 1 or 0 end
local b = books_read(key)
local mode = b.mode
local found = redis.call('HEXISTS', key, 'd:' .. id)
local parent = redis.call('HGET', key, 'p:' .. id)
local linked = parent and 1 or 0
local jumped = redis.call('HEXISTS', key, 'j:' .. id)
local named = redis.call('HEXISTS', key, 'n:' .. id)  -- its names list (chain_lib.lua)
local covers = redis.call('HEXISTS', key, 'l:' .. id)  -- its locators' cover (chain_lib.lua)
local leaf_deadline = tonumber(redis.call('HGET', key, 'e:' .. id) or '')
local has_ring = (ring ~= '' or token ~= '') and 1 or 0
local stamped = redis.call('HEXISTS', key, 'w')  -- the last-write stamp (chain_save.lua): not a record
local sized = redis.call('HEXISTS', key, 'm')  -- the largest record's size (chain_lib.lua): nor this
local records_left
if mode == 'on' and b.has_c == 1 then
  records_left = b.c - found
else
  -- Every field but the ring, the stamp and the size, less this record's: counts leftover
  -- book fields as records too, so it can only say "none left" when none is.
  records_left = redis.call('HLEN', key) - found - linked - jumped - named - covers - (ring ~= '' and 1 or 0) - stamped - sized
end
local pttl, linger = redis.call('PTTL', key), TOKENS_RETAIN_MS

-- writes
if found + linked + jumped + named + covers > 0 then redis.call('HDEL', key, 'd:' .. id, 'p:' .. id, 'j:' .. id, 'n:' .. id, 'l:' .. id) end
if token ~= '' then redis.call('HSET', key, 'ops', token_push(ring, token, found == 1 and 'D' or 'N', server_ms())) end
-- No record left: nothing to judge idle or to size, and neither field must keep the key.
if records_left == 0 and stamped + sized > 0 then redis.call('HDEL', key, 'w', 'm') end
if mode == 'on' and ARGV[6] == '1' then
  local L = b.L
  if found == 1 then
    redis.call('HDEL', key, 'e:' .. id, 'k:' .. id, 's:' .. id)
    L = leaves_remove(L, id)
    if parent and parent ~= '' then
      L = child_removed(key, parent, leaf_deadline or server_ms() + tonumber(ARGV[5]), L)
    end
  end
  if records_left > 0 then books_close(key, L, records_left, b) else books_off(key) end
elseif mode == 'on' or mode == 'taint' then
  books_off(key)
end
-- Nothing but the ring left: no record to keep alive, so let the ring go soon.
if records_left == 0 and has_ring == 1 and (pttl < 0 or pttl > linger) then
  redis.call('PEXPIRE', key, linger)
end
return found
