-- Append items (at most 20, checked by the caller) to a conversation.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token, ARGV[3..] item id, item, ... oldest first.
-- Replies {'ok'}, {'nf'} (no conversation), {'dup', id} (a live item has that
-- id), {'corrupt'}. A re-sent call (its token in the ring) writes nothing.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local hdr = redis.call('HMGET', key, 'c', 'n', 'ops')
if find(hdr[3], tok) then return {'ok'} end
if not hdr[1] then return {'nf'} end
local n = tonumber(hdr[2])
if not n then return {'corrupt'} end
local count = math.floor((#ARGV - 2) / 2)
local xs = {}
for j = 1, count do xs[j] = 'x:' .. ARGV[1 + 2 * j] end
local seqs = redis.call('HMGET', key, unpack(xs))
for j = 1, count do
  if seqs[j] and redis.call('HEXISTS', key, 'i:' .. seqs[j]) == 1 then return {'dup', ARGV[1 + 2 * j]} end
end
-- writes
local args = {'n', tostring(n + count), 'ops', remember(hdr[3], tok, 'a')}
for j = 1, count do
  args[#args + 1] = 'i:' .. (n + j)
  args[#args + 1] = ARGV[2 + 2 * j]
  args[#args + 1] = 'x:' .. ARGV[1 + 2 * j]
  args[#args + 1] = tostring(n + j)
end
redis.call('HSET', key, unpack(args))
expire(key, ttl)
return {'ok'}
