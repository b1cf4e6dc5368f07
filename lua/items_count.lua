-- How many entries an item session holds below its header (the CLI's stats).
-- KEYS[1] the session's list. A list from before headers has none to subtract.
-- The magic is redis_sessions/items/header.py's MAGIC (a test pins it).
local n = redis.call('LLEN', KEYS[1])
if n > 0 and string.sub(redis.call('LINDEX', KEYS[1], 0), 1, 4) == string.char(0) .. 'rs1' then n = n - 1 end
return n
