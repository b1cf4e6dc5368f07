-- Create a forked session only if the id holds no items (1), else 0.
-- KEYS[1] the new session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch, ARGV[3] source session id,
-- ARGV[4] source version the copy was taken at, ARGV[5] token,
-- ARGV[6..] the encoded items (RSFULL past MAX_BATCH_ITEMS; the caller checks
-- that first, and the new session's max_items).
-- An id with only a header (emptied or cleared), or a header and a stash,
-- counts as free; its ring and stash are kept so writes re-sent to it are
-- still recognised. Copying nothing writes nothing. A re-sent call replies 1.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[5]
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
if why == 'old' then return 0 end
if h then
  local r = find(h, tok)
  if r == false then return token_reused() end
  if r then return replay(r) end
  local len = redis.call('LLEN', key)
  if len > 2 or (len == 2 and stash(key, h) == '') then return 0 end
end
local err = refusal(#ARGV - 5, 0, '0')
if err then return err end
if #ARGV < 6 then return 1 end
local f = fresh(ARGV[2])
f.v, f.from, f.at, f.b = 1, ARGV[3], ARGV[4], longest(ARGV, 6)
if h then
  inherit(f, h, true)
  f.new = false
end
remember(f, tok, 'f')
-- writes
local n = #ARGV
for i = 6, n, 1000 do
  redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, n)))
end
save(key, f)
expire(key, ttl, 1, h ~= nil)
return 1
