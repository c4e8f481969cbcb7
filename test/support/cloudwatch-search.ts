/**
 * A model of how a CloudWatch SEARCH term matches a dimension value, after "CloudWatch search
 * expressions: Tokenization" and "Partial matches" in the CloudWatch User Guide: names split into
 * tokens at non-alphanumeric characters, where digits start and at camel-case boundaries; a term
 * of several tokens matches when they appear consecutively (case-sensitive), a one-token term
 * matches any equal token (case-insensitive). Exact (double-quoted) terms match the whole value.
 * Only the forms this project writes are understood: `QueueName=<term>` and `QueueName="<value>"`.
 */

/** The tokens of a name, in order, with their original case. */
export function cloudWatchTokens(value: string): string[] {
  return value
    .split(/[^A-Za-z0-9]+/)
    .flatMap((chunk) => chunk.match(/[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+/g) ?? []);
}

/** Whether the QueueName term of `expression` finds a queue named `queueName`. */
export function searchTermMatches(expression: string, queueName: string): boolean {
  const exact = /QueueName="((?:[^"\\]|\\.)*)"/.exec(expression);
  if (exact) return exact[1] === queueName;
  const partial = /QueueName=([^\s'"]+)/.exec(expression);
  if (!partial) throw new Error(`no QueueName term in ${expression}`);
  const term = cloudWatchTokens(partial[1]!);
  const tokens = cloudWatchTokens(queueName);
  if (term.length === 1) return tokens.some((t) => t.toLowerCase() === term[0]!.toLowerCase());
  return tokens.some((_, i) => term.every((t, j) => tokens[i + j] === t));
}
