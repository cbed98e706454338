import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  IEditorLanguage,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';

import { fcl } from './fcl';

/**
 * Adds `language`, or takes over the registered language of the same name or mimetype.
 *
 * JupyterLab already lists an unrelated "FCL" under `text/x-fcl`: the Fuzzy Control Language of
 * IEC 61131-7, from CodeMirror's legacy modes, with no file extensions. Its registry can neither
 * remove nor replace a language, so that entry gets FCL's support and file extension instead.
 */
function register(languages: IEditorLanguageRegistry, language: IEditorLanguage): void {
  const taken =
    languages.findByName(language.name) ?? languages.findByMIME(language.mime);
  if (!taken) {
    languages.addLanguage(language);
    return;
  }
  taken.support = language.support;
  (taken as { extensions?: readonly string[] }).extensions = language.extensions;
}

/**
 * Registers FCL with the editor. The FCL kernel's language_info names it (codemirror_mode
 * "fcl", mimetype text/x-fcl), so notebook cells use it; `.fcl` files open with it too.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'fcl-jupyterlab:language',
  description: 'FCL syntax highlighting in notebooks and .fcl files',
  autoStart: true,
  requires: [IEditorLanguageRegistry],
  activate: (app: JupyterFrontEnd, languages: IEditorLanguageRegistry) => {
    register(languages, {
      name: 'fcl',
      displayName: 'FCL',
      mime: 'text/x-fcl',
      extensions: ['fcl'],
      support: fcl()
    });
  }
};

export default plugin;
