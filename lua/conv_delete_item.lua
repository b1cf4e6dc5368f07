-- Delete one item. Its x:<id> field stays while its tombstone does (conv_lib.lua),
-- so a cursor naming it still pages; the run of deleted items it now belongs to,
-- [a, b], has g:a = b and g:b = a.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ('0': none), ARGV[2] token, ARGV[3] the item id, ARGV[4] the caller's owner ('' for none).
-- Returns {created_at, metadata}; refuses as conv_header does, or RSNOITEM (no such live
-- item). A re-sent call writes nothing and answers as the first did.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local got = redis.call('HMGET', key, 'h', 'm', 'ops', 'x:' .. ARGV[3])
local hd, refusal = conv_header(key, got[1], ARGV[4])
if not hd then return refusal end
if token_find(got[3], tok) then return again({hd.c, got[2]}) end
local seq = tonumber(got[4])
local near = seq and redis.call('HMGET', key, 'i:' .. seq, 'g:' .. (seq - 1), 'g:' .. (seq + 1))
if not (near and near[1]) then return redis.error_reply('RSNOITEM it has no item ' .. ARGV[3]) end
-- writes: the hole joins the runs on either side; only the joined run's ends keep g: fields
local a, b = tonumber(near[2]) or seq, tonumber(near[3]) or seq
local now = server_ms()
local gone = {'i:' .. seq}
if a < seq - 1 then gone[#gone + 1] = 'g:' .. (seq - 1) end
if b > seq + 1 then gone[#gone + 1] = 'g:' .. (seq + 1) end
redis.call('HDEL', key, unpack(gone))
redis.call('HSET', key, 'g:' .. a, tostring(b), 'g:' .. b, tostring(a), 'ops', token_push(got[3], tok, 'd', now))
tombstones(key, now, {ARGV[3], got[4]})
expire(key, ttl)
return {hd.c, got[2]}
