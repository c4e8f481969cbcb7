/** Exact Form URLs (compared as strings; the trailing slash is part of the identity). */
export const FORM_URLS = {
  atLeastOnceQueue: 'https://edge.forms.takoform.com/forms/AtLeastOnceQueue/0.2.0/',
  moduleWorker: 'https://edge.forms.takoform.com/forms/ModuleWorker/0.3.0/',
  queueConsumer: 'https://edge.forms.takoform.com/forms/QueueConsumer/0.3.0/',
} as const;
