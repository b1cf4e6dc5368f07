-- Save a response that belongs to a conversation and append its turn's items to that
-- conversation, in one atomic step (OpenAI's responses.create(conversation=)).
-- lua/tokens.lua, lua/conv_lib.lua and lua/chain_lib.lua come in front of this file.
-- KEYS[1]  the thread hash of the conversation's responses, <prefix>:{c:<id>}:chain
-- KEYS[2]  the conversation's hash, <prefix>:{c:<id>}:conv (the same hash tag: one slot)
-- ARGV[1..12]  the save, as lua/chain_save.lua takes it (a conversation's responses are roots)
-- ARGV[13] the conversation's TTL in ms ('0': none)
-- ARGV[14..] item id, item, ... the turn's input then output items, oldest first
-- Returns 'ok'; refuses as a save does, or RSNOCONV, RSDUP, RSCORRUPT (lua/conv_lib.lua).
--
-- Every check of both keys comes before the first write. A save that finds itself
-- already done (its token in the thread's ring, or the same record stored) answers 'ok'
-- and appends nothing: the append happened with it.
-- Another owner's conversation is not there (its thread, the conversation's, is that owner's too)
local refusal = conv_not_owned(KEYS[2], ARGV[12])
if refusal then return refusal end
local reply, got, leaf = save_check(KEYS[1], ARGV)
if reply then return reply end
local n, had = append_check(KEYS[2], ARGV, 14, ARGV[12])
if not n then return had end
-- writes: the thread is the conversation's owner's, whoever saves into it
save_write(KEYS[1], ARGV, got, leaf, had.o)  -- a conversation's response is a root: no locators to renew
append_write(KEYS[2], ARGV, 14, n, had, {})
tombstones(KEYS[2], server_ms())  -- a turn drops old tombstones as an add does
expire(KEYS[2], tonumber(ARGV[13]))
return 'ok'
