import { tsImport } from 'tsx/esm/api';

type Services = typeof import('../../kit/services/index.js');

/**
 * Stop what global setup started and remove its temp dirs; endpoints given
 * from outside are left alone. tsImport for the same reason as global-setup.ts.
 */
export default async function globalTeardown(): Promise<void> {
  const services = (await tsImport('../../kit/services/index.ts', import.meta.url)) as Services;
  await services.stopServices();
}
