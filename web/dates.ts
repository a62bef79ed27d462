/**
 * Dates as a person reads them at a glance, in the browser's language: `today 17:28`,
 * `yesterday 09:05`, a weekday and time within the week, the day and month within the year, else the
 * day, month and year.
 */

const time = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" })
const weekday = new Intl.DateTimeFormat(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit" })
const dayMonth = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short" })
const full = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" })
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" })

/** `when` (milliseconds since the epoch) in a short form, seen from `now`. */
export const short = (when: number, now: Date = new Date()): string => {
  const date = new Date(when)
  const days = Math.round((startOfDay(now) - startOfDay(date)) / 86_400_000)
  if (days === 0 || days === 1) return `${relative.format(-days, "day")} ${time.format(date)}`
  if (days > 1 && days < 7) return weekday.format(date)
  return date.getFullYear() === now.getFullYear() ? dayMonth.format(date) : full.format(date)
}

/** The date in full, in the browser's language (a title's text). */
export const long = (when: number): string => new Date(when).toLocaleString()

const startOfDay = (date: Date): number => new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime()
