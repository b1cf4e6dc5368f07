-- Delete a whole thread (delete_thread), if it is the caller's. lua/chain_lib.lua comes in front.
-- KEYS[1] the thread hash   ARGV[1] the caller's owner ('' for none)
-- Returns 1 if the key was unlinked (freed in the background), 0 if there is no thread or
-- it is another owner's; refuses RSVERSION for a thread of another data format.
local key = KEYS[1]
local h = redis.call('HGET', key, 'h')
if not h then return 0 end
local largest, _, _, _, owner = header(h)
if not largest then return unsupported(key, h) end
if not owned(owner, ARGV[1]) then return 0 end
return redis.call('UNLINK', key)
