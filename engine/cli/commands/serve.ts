/** `arbor serve [--port] [--stdio] [--device]`: the engine for a browser (WebSocket + the built renderer) or over stdio. */
import type { Command } from 'commander';
import { join } from 'node:path';
import { arborHome } from '../../store/db';
import { createEngine } from '../../server/engine';
import { attachStdio, serveWebSocket } from '../../server/transports';
import { ensureRendererBuild, rendererDistDir } from '../renderer-build';
import { resolveProviders, setDefaultProviders } from '../../tensor/ort';
import { DEVICES, deviceOption } from '../device-option';

export function register(program: Command): void {
  program
    .command('serve')
    .description('serve the engine on 127.0.0.1 (prints the URL with its access token)')
    .option('--port <n>', 'port (0 = any free port)', '0')
    .option('--stdio', 'speak the protocol as JSON lines on stdin/stdout instead')
    .option(
      '--static <dir>',
      'a renderer build to serve as it is (default: renderer/dist, or $ARBOR_RENDERER_DIR, built on first use and rebuilt when its sources changed)',
    )
    .option(
      '--device <device>',
      `ONNX Runtime device of the playground's models: ${DEVICES.join(', ')} (default cpu; runs use their config's device)`,
      deviceOption,
    )
    .action(async (o: { port: string; stdio?: boolean; static?: string; device?: string; yes?: boolean }) => {
      // Sessions created without a device (the playground, the OpenAI-compatible endpoint) run on this one.
      if (o.device) setDefaultProviders(await resolveProviders(o.device));
      // The workbench page is built before the URL is printed, so the URL always opens it.
      const staticDir = o.stdio ? undefined : (o.static ?? rendererDistDir());
      if (!o.stdio && !o.static) await ensureRendererBuild(staticDir);
      const engine = await createEngine({ home: arborHome() });
      // Programs a config or stored run would run that the workspace has not approved: a dialog in
      // the workbench (--yes: approved without asking).
      const { workbenchAsker } = await import('../../server/consent');
      const { setConsentAsker, yesFromEnv } = await import('../../env/consent');
      const ask = workbenchAsker(engine);
      if (!o.yes && !yesFromEnv()) setConsentAsker(ask);
      if (engine.workspaceError)
        console.error(`arbor serve: ${engine.workspaceError}\n(the engine is up; open another workspace from the UI or set ARBOR_HOME)`);
      if (o.stdio) return attachStdio(engine);
      const s = await serveWebSocket(engine, { port: Number(o.port), staticDir });
      console.log(`Arbor engine serving ${join(arborHome(), 'arbor.db')}`);
      console.log(s.url);
      const stop = async () => {
        await s.close();
        engine.close();
        process.exit(0);
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
}
