-- token_bucket (GCRA) on Redis: the decision of crates/limit/src/token_bucket.rs for one key,
-- in microseconds (Redis's TIME has no finer grain; the local one counts nanoseconds, so
-- the two agree exactly whenever a request's interval is a whole number of µs, as for
-- 10r/s or 5r/m). The key holds `tat`, the theoretical arrival time in µs since the Unix
-- epoch; the bucket's level at `now` is tat - now. Check and charge are one step.
--
-- KEYS[1]  tollgate:<zone>:<key>
-- ARGV[1]  t: the emission interval, µs per request (at least 1)
-- ARGV[2]  cost: cost x t
-- ARGV[3]  cap: (burst + 1) x t
-- ARGV[4]  free: (delay + 1) x t, or -1 for nodelay
-- ARGV[5]  want: what to take when admitted, leased units included (lease x t); 0 for no
--          lease. Then, last but one, the time; last, the mode:
-- ARGV[#ARGV - 1]  the time in microseconds, or "" for Redis's own clock (only tests set it)
-- ARGV[#ARGV]  "refund" to give back `cost` taken by an earlier call, "charge" to take `cost`
--          whatever the level, else ""
--
-- Returns {1, delay_us, remaining, reset_us, granted} when admitted (granted: whole
--         requests taken beyond `cost` for the caller's lease, only when admitted without
--         delay, never beyond `free` or `cap`), or
--         {0, retry_after_us (-1: never), remaining, reset_us} when rejected.

local t = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local free = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local mode = ARGV[#ARGV]
local now = clock_us(ARGV[#ARGV - 1])

local tat = tonumber(redis.call('GET', KEYS[1])) or now
local level = math.max(tat - now, 0)

if mode == 'refund' then
  local left = level - cost
  if left <= 0 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], string.format('%.0f', now + left), 'PX', math.ceil(left / 1000))
  end
  return {1, 0, 0, 0}
end

local after = level + cost
if after > cap and mode ~= 'charge' then
  local retry = -1
  if cost <= cap then
    retry = after - cap
  end
  return {0, retry, math.floor((cap - math.min(level, cap)) / t), level}
end

local delay = 0
if free >= 0 and after > free and mode ~= 'charge' then
  delay = after - free
end
local granted = 0
if mode == '' and want > cost and delay == 0 then
  local room = cap - after
  if free >= 0 then
    room = math.min(room, free - after)
  end
  granted = math.floor(math.max(math.min(room, want - cost), 0) / t)
  after = after + granted * t
end
redis.call('SET', KEYS[1], string.format('%.0f', now + after), 'PX', math.max(math.ceil(after / 1000), 1))
return {1, delay, math.floor((cap - after) / t), after, granted}
