-- Decide every key first, write only if all admit: several limits are
-- charged all or nothing.
local out, commits, all = {}, {}, true
for i = 1, #KEYS do
  local b = 3 * i
  local r, commit = ALG[ARGV[b + 1]](KEYS[i], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), mode == 'refund')
  if r[1] == 0 then all = false end
  commits[i] = commit
  for j = 1, 6 do out[#out + 1] = r[j] end
end
if all and mode ~= 'peek' then
  for i = 1, #KEYS do
    if commits[i] then commits[i]() end
  end
end
return out
