-- Go on with a save's walk up a thread for the locators of its ancestors minted elsewhere
-- (lua/chain_lib.lua, l:), where the save's own walk ran out of steps.
-- KEYS[1] the thread hash   ARGV[1] the record to go on from
-- ARGV[2] until when (ms) the locators must last   ARGV[3] until when they are renewed
-- Returns {the record to go on from ('' done), the ids whose locators to renew...}.
local key, need, far = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local above, walked, renew, frontier = cover_walk(key, ARGV[1], need, far)
if above ~= false then covered(key, walked, above, far) end
return {frontier or '', unpack(renew)}
