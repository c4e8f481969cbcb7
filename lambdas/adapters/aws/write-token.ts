/**
 * A token a conditional write leaves in its item. The SDK sends a write again when its answer is
 * lost (a dropped connection, a 500 after the commit); that second try then fails its condition
 * against the first try's own change. With the item as it was (ReturnValuesOnConditionCheckFailure
 * ALL_OLD) the write finds its token there and knows the change is its own. Random per call:
 * every try of one call is the same request, so it carries the same token.
 */
import { randomBytes } from 'node:crypto';

export const writeToken = (): string => randomBytes(9).toString('base64url');
