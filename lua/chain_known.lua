-- Read a chain whose ids the caller knows (the store's memo of the chains it resolved
-- and saved: redis_sessions/responses/names.py), in one call and two reads, with no walk.
-- KEYS[1]  the thread hash
-- ARGV[1]  inline budget in bytes (lua/chain_walk.lua's ARGV[4])
-- ARGV[2..] the records' fields (d:<id>), newest first
-- Returns {'+', record...} (false for a record that is not there), or {'-', largest}
-- having read no record: the thread's m (lua/chain_lib.lua) does not tell its largest
-- record (largest -1), or the records counted at it would pass the budget. The check
-- comes first, so a chain whose records grew since the caller saw them (an overwrite
-- elsewhere) is never copied whole: the caller walks it, as any other.
-- The caller checks that the records link up (each names its parent, the last a root):
-- the memo is a hint, as a names list is; one that does not hold is walked.
-- Measured, 10 records of 0.7 KB: 1.9x the server CPU of one HMGET of the same records,
-- against 2.7x for the walk (benchmarks/bench_chain_cost.py).
local key = KEYS[1]
local got = redis.pcall('HMGET', key, 'm', 'w')
if got.err then return {'-', -1} end  -- another type: the walk tells it
local m, w = got[1], got[2]
local space = m and w and string.find(m, ' ', 1, true)
local told = space and string.sub(m, space + 1) == w and tonumber(string.sub(m, 1, space - 1))
if not told then return {'-', -1} end
if told * (#ARGV - 1) > tonumber(ARGV[1]) then return {'-', told} end
local out = redis.call('HMGET', key, unpack(ARGV, 2))
table.insert(out, 1, '+')
return out
