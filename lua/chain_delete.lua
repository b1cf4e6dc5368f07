-- Delete one response from its thread hash. KEYS[1] the thread hash, ARGV[1] the id.
-- Returns 1 if it was there, 0 if not, or {'wrongtype', kind}.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return 0 end
if kind ~= 'hash' then return {'wrongtype', kind} end
return redis.call('HDEL', KEYS[1], 'd:' .. ARGV[1], 'p:' .. ARGV[1]) > 0 and 1 or 0
