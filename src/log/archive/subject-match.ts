/** Whether a NATS subject matches a filter with `*` (one token) and `>` (the rest). Pure. */
export function subjectMatches(filter: string, subject: string): boolean {
  if (filter === subject) return true;
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    const token = f[i];
    if (token === ">") return s.length > i;
    if (i >= s.length) return false;
    if (token !== "*" && token !== s[i]) return false;
  }
  return f.length === s.length;
}
