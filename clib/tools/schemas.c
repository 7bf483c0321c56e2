/* schemas.c — the installed GSettings schemas, by path (dconf-tool.h). */
#include "dconf-tool.h"

Schemas schemas_load(void) {
    Schemas schemas = {
        .fixed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_settings_schema_unref),
    };
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    char **ids = NULL;
    if (source) g_settings_schema_source_list_schemas(source, TRUE, &ids, &schemas.relocatable);
    for (char **id = ids; id && *id; id++) {
        GSettingsSchema *schema = g_settings_schema_source_lookup(source, *id, TRUE);
        if (schema && g_settings_schema_get_path(schema))
            g_hash_table_insert(schemas.fixed, g_strdup(g_settings_schema_get_path(schema)), schema);
        else if (schema) g_settings_schema_unref(schema);
    }
    g_strfreev(ids);
    return schemas;
}

void schemas_clear(Schemas *schemas) {
    g_hash_table_unref(schemas->fixed);
    g_strfreev(schemas->relocatable);
    schemas->fixed = NULL;
    schemas->relocatable = NULL;
}

GSettingsSchema *schemas_for(const Schemas *schemas, const char *dir, GPtrArray *names) {
    GSettingsSchema *schema = g_hash_table_lookup(schemas->fixed, dir);
    if (schema) return g_settings_schema_ref(schema);
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    GSettingsSchema *found = NULL;
    for (char **id = schemas->relocatable; source && id && *id; id++) {
        GSettingsSchema *candidate = g_settings_schema_source_lookup(source, *id, TRUE);
        gboolean all = candidate != NULL;
        for (guint i = 0; all && i < names->len; i++) all = g_settings_schema_has_key(candidate, names->pdata[i]);
        if (!all) {
            if (candidate) g_settings_schema_unref(candidate);
            continue;
        }
        if (found) { /* two fit: neither is known to be it */
            g_settings_schema_unref(candidate);
            g_settings_schema_unref(found);
            return NULL;
        }
        found = candidate;
    }
    return found;
}
