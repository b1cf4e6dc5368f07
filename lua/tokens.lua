-- Operation tokens: the one exactly-once mechanism of every write of every store
-- (redis_sessions/tokens.py makes the tokens and says why; redis_sessions/scripts.py
-- puts this file in front of every write script). A write's ARGV carries one token
-- per logical call:
--   16 hex digits              a random token, one call (redis-py's re-send keeps it)
--   'k' 16 hex '.' 8 hex       a caller's idempotency key, hashed, and its body's
--                              fingerprint: any caller's retry with that key is the retry
-- The key a write changes remembers its recent tokens in one string, oldest first,
-- an entry a line:   <server time, s, 10 digits><token> <outcome>\n
-- An entry is kept at least TOKENS_RETAIN_S after its write (server TIME: workers'
-- clocks never matter), and the string never holds more than TOKENS_MAX_BYTES (an
-- entry takes at least 29 bytes: at most 35 entries); past either bound the oldest
-- go first. Every write reads and rewrites the string, so its bound is its cost: 1 KiB
-- keeps a write within a few us of the 16-entry rings this replaced, and holds the
-- window for a key written up to once a second. A string of another format (a ring
-- from before) matches nothing and is dropped by the next write.
local TOKENS_RETAIN_S, TOKENS_MAX_BYTES = 30, 1024
local TOKENS_RETAIN_MS = TOKENS_RETAIN_S * 1000  -- how long a key left with only its ring is kept

-- The server's clock in whole ms.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- What tok's write answered, as remembered: its outcome (a string); nil when it is not
-- remembered (or tok is ''); false when tok's idempotency key was used with another body.
local function token_find(ring, tok)
  if not ring or tok == '' then return nil end
  local dot = string.find(tok, '.', 1, true)
  local id = dot and string.sub(tok, 1, dot - 1) or tok
  local from = 1
  for _ = 1, TOKENS_MAX_BYTES / 29 do
    local at = string.find(ring, id, from, true)
    if not at then return nil end
    if at > 10 and (at == 11 or string.sub(ring, at - 11, at - 11) == '\n')
        and string.match(ring, '^[ .]', at + #id) then
      local whole, outcome = string.match(ring, '^([^ \n]*) ([^\n]*)', at)
      if whole ~= tok then return false end
      return outcome
    end
    from = at + 1
  end
  return nil
end

-- The answer of a write whose token is in the ring (a re-sent copy of a call that ran):
-- what the first run answered, marked so that redis_sessions/edge.py can tell, unwrap it
-- and count it. NUL starts no id, item or outcome any script returns.
local function again(reply)
  return {'\0again', reply}
end

-- The refusal of a call whose idempotency key was used before with another body.
local function token_reused()
  return redis.error_reply('RSREUSED this idempotency key was used with a different body')
end

-- ring with tok's write (at server time now_ms) as the newest entry. Entries past the
-- retention go, oldest first; when the bound would be passed, the oldest go until a
-- quarter of it is free, so most writes only append (every string a script makes costs
-- Redis time per KB: docs/benchmarks.md#unit-costs). A ring that does not parse is dropped.
local function token_push(ring, tok, outcome, now_ms)
  local now = math.floor(now_ms / 1000)
  local entry = string.format('%010.0f', now) .. tok .. ' ' .. outcome .. '\n'
  if not ring or string.sub(ring, -1) ~= '\n' then return entry end
  local stamp = tonumber(string.match(ring, '^%d%d%d%d%d%d%d%d%d%d'))
  local room = #ring + #entry <= TOKENS_MAX_BYTES and 0 or #ring + #entry - TOKENS_MAX_BYTES * 3 / 4
  if room <= 0 and stamp and stamp >= now - TOKENS_RETAIN_S then return ring .. entry end
  local from = 1
  for _ = 1, TOKENS_MAX_BYTES / 29 + 1 do
    if stamp and stamp >= now - TOKENS_RETAIN_S and from > room then break end
    local nl = string.find(ring, '\n', from, true)
    if not nl or nl == #ring then return entry end
    from = nl + 1
    stamp = tonumber(string.match(ring, '^%d%d%d%d%d%d%d%d%d%d', from))
  end
  return string.sub(ring, from) .. entry
end

-- When the newest write a ring remembers was made (server time, s); nil for no ring. Every
-- write of every store pushes its token, so this is when the key was last written.
local function token_newest_s(ring)
  if not ring or string.sub(ring, -1) ~= '\n' then return nil end
  local from = #ring - 1
  while from > 0 and string.sub(ring, from, from) ~= '\n' do from = from - 1 end
  return tonumber(string.sub(ring, from + 1, from + 10))
end
