-- Delete a whole session (items and meta) in one step.
-- KEYS[1] items list, KEYS[2] meta hash
return redis.call('DEL', KEYS[1], KEYS[2])
