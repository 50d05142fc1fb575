/* A shared library without the plugin entry symbol (test fixture). */
int pluginhost_not_the_entry(void) { return 42; }
