-- Create a forked session only if the id holds no items (1), else 0.
-- KEYS[1] the new session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] epoch, ARGV[3] the source session's id,
-- ARGV[4] the source's version the copy was read at, ARGV[5] token,
-- ARGV[6..] the encoded items (RSFULL past MAX_BATCH_ITEMS; the caller checks that
-- first, and the new session's max_items).
-- An id whose session holds no items (emptied or cleared) counts as free; its ring and
-- stash are kept, so writes re-sent to it are still recognised. Copying nothing writes
-- nothing. A re-sent call replies 1.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[5]
local refusal, longest, push, fresh = writes()
local h, err = head(key)
if err then return err end
if h then
  local r = token_find(h.ring, tok)
  if r == false then return token_reused() end
  if r then return again(replay(r)) end
  if h.n > 0 then return 0 end
end
err = refusal(#ARGV - 5, 0, '0')
if err then return err end
if #ARGV < 6 then return 1 end
local f = fresh(ARGV[2], ARGV[3], ARGV[4])
f.v, f.n, f.b = 1, #ARGV - 5, longest(ARGV, 6)
if h then f.ring, f.p, f.s = h.ring, h.p, h.s end
remember(f, tok, 'f')
-- writes
if h then redis.call('LTRIM', key, 0, -3) else redis.call('RPUSH', key, STASH, STASH) end
push(key, ARGV, 6, f, ttl)
return 1
