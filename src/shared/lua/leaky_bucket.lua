-- leaky_bucket on Redis: nginx's limit_req decision for one key, the same arithmetic as
-- crates/limit/src/leaky_bucket.rs (a request is UNIT units; a key drains per_ms units each
-- millisecond; `f` = nginx's excess plus one request; `l` = the last admitted ms).
-- Check and charge are one step: an admitted request is charged, a rejected one changes
-- nothing. Every number stays below 2^53, so Lua's doubles hold them exactly.
--
-- KEYS[1]  tollgate:<zone>:<key>
-- ARGV[1]  per_ms: units drained per millisecond
-- ARGV[2]  cost: units this request takes (cost x UNIT)
-- ARGV[3]  cap: the most units a key may hold ((burst + 1) x UNIT)
-- ARGV[4]  free: units admitted without delay ((delay + 1) x UNIT), or -1 for nodelay
-- ARGV[5]  UNIT
-- ARGV[6]  want: units to take when admitted, leased units included (lease x UNIT); 0 for
--          no lease. Then, last but one, the time; last, the mode:
-- ARGV[#ARGV - 1]  the time in microseconds, or "" for Redis's own clock (only tests set it)
-- ARGV[#ARGV]  "refund" to give back `cost` taken by an earlier call (a later zone rejected
--          the request, or its answer did not count), "charge" to take `cost` whatever
--          the level (what an answer says the request owes), else ""
--
-- Returns {1, delay_ms, remaining, reset_ms, granted} when admitted (granted: whole
--         requests taken beyond `cost` for the caller's lease, only when admitted without
--         delay, never beyond `free` or `cap`), or
--         {0, retry_after_us (-1: never), remaining, reset_ms} when rejected.

local per_ms = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local free = tonumber(ARGV[4])
local unit = tonumber(ARGV[5])
local want = tonumber(ARGV[6])
local mode = ARGV[#ARGV]
local now_us = clock_us(ARGV[#ARGV - 1])
local now_ms = math.floor(now_us / 1000)

local stored = redis.call('HMGET', KEYS[1], 'f', 'l')
local fill = tonumber(stored[1]) or 0
local last = tonumber(stored[2]) or now_ms
local elapsed = math.max(now_ms - last, 0)
local level = math.max(fill - per_ms * elapsed, 0)

if mode == 'refund' then
  local left = math.max(level - cost, 0)
  if left == 0 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('HSET', KEYS[1], 'f', string.format('%.0f', left), 'l',
      string.format('%.0f', math.max(last, now_ms)))
    redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(left / per_ms), 1))
  end
  return {1, 0, 0, 0}
end

local after = level + cost

if after > cap and mode ~= 'charge' then
  local retry_us = -1
  if cost <= cap then
    local wait_ms = math.ceil((after - cap) / per_ms)
    retry_us = (now_ms + wait_ms) * 1000 - now_us
  end
  return {0, retry_us, math.floor((cap - math.min(level, cap)) / unit), math.ceil(level / per_ms)}
end

local delay_ms = 0
if free >= 0 and mode ~= 'charge' then
  delay_ms = math.floor(math.max(after - free, 0) / per_ms)
end
local granted = 0
if mode == '' and want > cost and delay_ms == 0 then
  local room = cap - after
  if free >= 0 then
    room = math.min(room, free - after)
  end
  granted = math.floor(math.max(math.min(room, want - cost), 0) / unit)
  after = after + granted * unit
end
local drain_ms = math.ceil(after / per_ms)
redis.call('HSET', KEYS[1], 'f', string.format('%.0f', after), 'l',
  string.format('%.0f', math.max(last, now_ms)))
redis.call('PEXPIRE', KEYS[1], math.max(drain_ms, 1))
return {1, delay_ms, math.floor((cap - after) / unit), drain_ms, granted}
