/** Header names are matched case-insensitively (SQS attributes keep the producer's case). */
export const carrierGetter = {
  keys: (carrier: Readonly<Record<string, string>>) => Object.keys(carrier),
  get: (carrier: Readonly<Record<string, string>>, key: string): string | undefined => {
    const exact = carrier[key];
    if (exact !== undefined) return exact;
    const lower = key.toLowerCase();
    for (const [name, value] of Object.entries(carrier))
      if (name.toLowerCase() === lower) return value;
    return undefined;
  },
};
