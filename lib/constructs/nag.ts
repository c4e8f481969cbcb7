import { Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * A resource string as cdk-nag spells it in finding ids: intrinsics become `<AWS::Region>`,
 * `<LogicalId.Attr>` and so on, so an acknowledgement names exactly the resource it covers,
 * whether the stack's region and account are concrete or tokens.
 */
export function nagResource(scope: IConstruct, value: string): string {
  const render = (v: unknown): string => {
    if (typeof v === 'string') return v;
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.Ref === 'string') return `<${o.Ref}>`;
      const getAtt = o['Fn::GetAtt'];
      if (Array.isArray(getAtt)) return `<${getAtt.join('.')}>`;
      const join = o['Fn::Join'];
      if (Array.isArray(join)) return (join[1] as unknown[]).map(render).join(String(join[0]));
    }
    return JSON.stringify(v);
  };
  return render(Stack.of(scope).resolve(value));
}
